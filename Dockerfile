FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY config ./config
COPY ingest ./ingest
COPY dashboard ./dashboard
COPY evals ./evals
COPY demo ./demo
RUN pip install --no-cache-dir .
COPY . .
# Hashed, compressed static files (plotly.js from the plotly package) into var/staticfiles: the
# manifest storage needs them before the first page; the key here only lets settings load.
RUN SECRET_KEY=collectstatic-at-build-time python manage.py collectstatic --no-input -v 0
# Run as a non-root user; it owns /app because settings create var/ (static files, beat schedule).
RUN useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin toolwatch \
    && mkdir -p /app/var && chown -R toolwatch:toolwatch /app
USER toolwatch
# 8000: the web server (pages, API, OTLP/HTTP); 4318: OTLP/HTTP in compose (its otlp service);
# 4317: the OTLP/gRPC receiver (manage.py grpcserver)
EXPOSE 8000 4318 4317
# Liveness only (/healthz touches no database); compose's web service checks /readyz instead.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]
# Run alone, one gunicorn serves everything; docker-compose.yml splits the pages and API (granian)
# from OTLP/HTTP (gunicorn) instead (docs/operations.md#docker-compose-services).
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "2"]
