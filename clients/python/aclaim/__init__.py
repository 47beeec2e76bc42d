"""aclaim's Python client.

``aclaim.producer.Producer`` enqueues, cancels and reads jobs inside the service's own
transaction; ``aclaim.consumer.ResultConsumer`` receives the verdicts of a consumer group, at
least once until acknowledged and never again after. Both speak the SQL API of
schema/0008_integration.sql through Debian's python3-psycopg2 (docs/integration.md).
"""

__version__ = "0.1.0"
