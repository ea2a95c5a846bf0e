"""Metrics (Prometheus), traces (OpenTelemetry) and structured logs."""
