"""`trainplane cost`: GPU dollars by team, job or pool from Prometheus alone (docs/operations.md).

prometheus.py asks Prometheus (one line on any failure); report.py turns the answers into the rows a
finance or platform lead reads, as a table or CSV. The queries are the cost recording rules' own
expressions (components/incluster/cost_rules.py), so the report and the rules agree to the cent.
"""
