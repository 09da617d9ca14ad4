// One agent trace with two tool calls (one failing), exported once through the official
// OTLP/gRPC trace exporter, configured only by the standard variables a user would set:
// OTEL_EXPORTER_OTLP_ENDPOINT (http://host:4317), OTEL_EXPORTER_OTLP_HEADERS
// (Authorization=Bearer tw_…) and OTEL_EXPORTER_OTLP_COMPRESSION (gzip).
// Prints the export result as one JSON line: {"code": 0|1, "error": …, "spans": N, "traceId": …}.
// Run by tests/ingest/test_grpc.py with NODE_PATH pointing at an `npm install` of package.json.
'use strict';

const { context, trace, SpanStatusCode } = require('@opentelemetry/api');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-grpc');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');

const memory = new InMemorySpanExporter();
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({
    'service.name': process.env.OTEL_SERVICE_NAME || 'node-agent',
    'deployment.environment.name': 'test',
  }),
  spanProcessors: [new SimpleSpanProcessor(memory)],
});
const tracer = provider.getTracer('toolwatch.tests.node-grpc', '1.0.0');

const agent = tracer.startSpan('invoke_agent planner', {
  attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'planner' },
});
const inAgent = trace.setSpan(context.active(), agent);
const search = tracer.startSpan(
  'execute_tool search_docs',
  { attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'search_docs', 'gen_ai.tool.call.id': 'call_1' } },
  inAgent,
);
search.end();
const create = tracer.startSpan(
  'execute_tool create_issue',
  {
    attributes: {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'create_issue',
      'gen_ai.tool.call.id': 'call_2',
      'http.response.status_code': 429,
    },
  },
  inAgent,
);
create.recordException(new Error('rate limited: retry after 30s'));
create.setStatus({ code: SpanStatusCode.ERROR, message: 'rate limited: retry after 30s' });
create.end();
agent.end();

const spans = memory.getFinishedSpans();
const exporter = new OTLPTraceExporter(); // everything from the OTEL_EXPORTER_OTLP_* variables
exporter.export(spans, (result) => {
  const error = result.error ? `${result.error.code !== undefined ? result.error.code + ' ' : ''}${result.error.message || result.error}` : null;
  console.log(JSON.stringify({ code: result.code, error, spans: spans.length, traceId: agent.spanContext().traceId }));
  exporter
    .shutdown()
    .then(() => provider.shutdown())
    .then(() => process.exit(0));
});
