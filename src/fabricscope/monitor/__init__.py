"""Prometheus exporter, Grafana dashboard and alert rules (an adapter over host/, checks/, nccl/).

``Exporter(root, ExporterOptions(...))`` builds the collectors; ``MetricsServer`` serves them;
``assets`` writes the dashboard and the alert rules shipped in ``monitor/assets/``. Needs the
``prom`` extra (prometheus-client).
"""
