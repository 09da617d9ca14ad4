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
# 8000: the web server (pages, API, OTLP/HTTP); 4317: the OTLP/gRPC receiver (manage.py grpcserver)
EXPOSE 8000 4317
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "2"]
