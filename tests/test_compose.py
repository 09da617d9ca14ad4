"""docker-compose.yml, read as Compose reads it (YAML with its merge keys), since no test here can
run Docker: valid against the Compose Specification's own JSON schema, and the production shape
docs/operations.md#docker-compose-services describes: a one-shot migrate every app service waits
for, a health check and a restart policy on every long-running service, the web service on
granian without OTLP/HTTP, OTLP/HTTP on gunicorn's sync workers on 4318.

tests/data/compose-spec.json is schema/compose-spec.json of github.com/compose-spec/compose-spec
(Apache-2.0) at commit 170098ba07d9f53c383a41bfd4c5166b0a4529a6 (2026-06-23).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
APP_SERVICES = [name for name, service in SERVICES.items() if service.get("build") == "."]
LONG_RUNNING = [name for name, service in SERVICES.items() if name != "migrate" and "profiles" not in service]


def test_the_file_is_valid_against_the_compose_specification():
    schema = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())

    errors = [f"{'/'.join(map(str, error.path))}: {error.message}" for error in jsonschema.Draft7Validator(schema).iter_errors(COMPOSE)]

    assert errors == []


def test_the_app_services_are_the_ones_the_docs_list():
    assert sorted(APP_SERVICES) == ["beat", "grpc", "migrate", "otlp", "web", "worker"]


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_every_long_running_service_restarts_and_has_a_health_check(name):
    service = SERVICES[name]

    assert service["restart"] == "unless-stopped"
    assert service["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL")


@pytest.mark.parametrize("name", sorted(set(APP_SERVICES) - {"migrate"}))
def test_every_app_service_waits_for_the_migration_and_the_services(name):
    depends = SERVICES[name]["depends_on"]

    assert depends["migrate"] == {"condition": "service_completed_successfully"}
    assert depends["postgres"] == depends["redis"] == {"condition": "service_healthy"}
    assert SERVICES[name]["env_file"] == [{"path": ".env", "required": False}]
    assert SERVICES[name]["environment"]["SECRET_KEY"].startswith("${SECRET_KEY:?")


def test_the_migration_runs_once_after_postgres():
    migrate = SERVICES["migrate"]

    assert migrate["restart"] == "no" and migrate["command"] == "python manage.py migrate --no-input"
    assert migrate["depends_on"] == {"postgres": {"condition": "service_healthy"}}


def test_the_web_service_runs_granian_without_otlp_and_otlp_runs_gunicorn_sync_workers():
    web, otlp = SERVICES["web"], SERVICES["otlp"]

    assert "exec granian config.wsgi:application --interface wsgi" in web["command"]
    assert web["environment"]["TOOLWATCH_OTLP_HTTP"] == "0"
    assert web["ports"] == ["${TOOLWATCH_PUBLISH_ADDRESS:-127.0.0.1}:8000:8000"]
    # gunicorn's default worker class is sync (one request a process): no -k, no --threads.
    assert otlp["command"] == "gunicorn config.wsgi:application --bind 0.0.0.0:4318 --timeout 30"
    assert "TOOLWATCH_OTLP_HTTP" not in otlp["environment"]  # on: the default
    assert otlp["ports"] == ["${TOOLWATCH_PUBLISH_ADDRESS:-127.0.0.1}:4318:4318"]
    assert "4318/readyz" in " ".join(otlp["healthcheck"]["test"])


def test_the_collector_example_exports_to_the_otlp_service():
    collector = yaml.safe_load((ROOT / "docs" / "otel-collector.yaml").read_text())

    assert collector["exporters"]["otlphttp/toolwatch"]["endpoint"] == "http://otlp:4318"
