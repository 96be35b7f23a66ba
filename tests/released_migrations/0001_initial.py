"""The 21 later_* tables (see docs/data-model.md).

Written against the models in ``later_django/models.py`` and kept in step with
them by the test ``test_makemigrations_finds_nothing_to_do``. Triggers, partial
and covering indexes are vendor SQL in ``0002_triggers_and_indexes``. Released
migrations are never edited: changes come as new migrations.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="DeliveryMessage",
            fields=[
                ("sequence", models.BigAutoField(primary_key=True, serialize=False)),
                ("namespace", models.CharField(max_length=200)),
                ("queue_name", models.CharField(max_length=200)),
                ("payload", models.BinaryField()),
                ("priority", models.IntegerField(default=0)),
                ("available_at", models.BigIntegerField()),
                ("lease_owner", models.CharField(max_length=200, null=True)),
                ("lease_until", models.BigIntegerField(null=True)),
            ],
            options={
                "db_table": "later_delivery_queue",
            },
        ),
        migrations.CreateModel(
            name="JobIndexEntry",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "job_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("job_id", models.CharField(max_length=200)),
                ("payload_type", models.CharField(max_length=500)),
                ("stage", models.CharField(max_length=20)),
                ("stage_date_ms", models.BigIntegerField()),
                ("revision", models.BigIntegerField(default=0)),
                ("created_at_ms", models.BigIntegerField()),
                ("wait_ms", models.BigIntegerField(null=True)),
                ("wait_mode", models.CharField(max_length=20, null=True)),
                ("topic", models.CharField(max_length=200, null=True)),
                ("partition_id", models.IntegerField(null=True)),
                ("sequence", models.BigIntegerField(null=True)),
                ("parent_job_id", models.CharField(max_length=200, null=True)),
                ("date_expire", models.BigIntegerField(null=True)),
            ],
            options={
                "verbose_name": "job",
                "db_table": "later_jobs_index",
                "permissions": [
                    ("manage_jobs", "Can retry, delete and run jobs from the dashboard")
                ],
            },
        ),
        migrations.CreateModel(
            name="JobTransitionMetric",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "stage",
                        "minute_bucket",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("stage", models.CharField(max_length=20)),
                ("minute_bucket", models.BigIntegerField()),
                ("count", models.BigIntegerField(default=0)),
            ],
            options={
                "db_table": "later_job_transition_metrics",
            },
        ),
        migrations.CreateModel(
            name="JobWaitMetric",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "mode",
                        "minute_bucket",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("mode", models.CharField(max_length=20)),
                ("minute_bucket", models.BigIntegerField()),
                ("count", models.BigIntegerField(default=0)),
                ("sum_ms", models.BigIntegerField(default=0)),
                ("max_ms", models.BigIntegerField(default=0)),
            ],
            options={
                "db_table": "later_job_wait_metrics",
            },
        ),
        migrations.CreateModel(
            name="LogConsumerLease",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "group_name",
                        "topic",
                        "partition_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("group_name", models.CharField(max_length=200)),
                ("topic", models.CharField(max_length=200)),
                ("partition_id", models.IntegerField()),
                ("owner", models.CharField(max_length=200, null=True)),
                ("lease_until", models.BigIntegerField(default=0)),
                ("epoch", models.BigIntegerField(default=0)),
            ],
            options={
                "db_table": "later_log_consumer_lease",
            },
        ),
        migrations.CreateModel(
            name="LogConsumerMember",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "group_name",
                        "topic",
                        "member_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("group_name", models.CharField(max_length=200)),
                ("topic", models.CharField(max_length=200)),
                ("member_id", models.CharField(max_length=200)),
                ("joined_at", models.BigIntegerField()),
                ("heartbeat_at", models.BigIntegerField()),
            ],
            options={
                "db_table": "later_log_consumer_member",
            },
        ),
        migrations.CreateModel(
            name="LogConsumerOffset",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "group_name",
                        "topic",
                        "partition_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("group_name", models.CharField(max_length=200)),
                ("topic", models.CharField(max_length=200)),
                ("partition_id", models.IntegerField()),
                ("next_offset", models.BigIntegerField(default=0)),
                ("updated_at", models.BigIntegerField()),
            ],
            options={
                "db_table": "later_log_consumer_offset",
            },
        ),
        migrations.CreateModel(
            name="LogPartition",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "topic",
                        "partition_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("topic", models.CharField(max_length=200)),
                ("partition_id", models.IntegerField()),
                ("next_offset", models.BigIntegerField(default=0)),
            ],
            options={
                "db_table": "later_log_partition",
            },
        ),
        migrations.CreateModel(
            name="LogRecord",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "topic",
                        "partition_id",
                        "record_offset",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("topic", models.CharField(max_length=200)),
                ("partition_id", models.IntegerField()),
                ("record_offset", models.BigIntegerField()),
                ("record_key", models.BinaryField(null=True)),
                ("payload", models.BinaryField()),
                ("appended_at", models.BigIntegerField()),
            ],
            options={
                "db_table": "later_log_record",
            },
        ),
        migrations.CreateModel(
            name="PartitionLease",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "topic",
                        "partition_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("topic", models.CharField(max_length=200)),
                ("partition_id", models.IntegerField()),
                ("owner", models.CharField(max_length=200, null=True)),
                ("lease_until", models.BigIntegerField(default=0)),
                ("epoch", models.BigIntegerField(default=0)),
            ],
            options={
                "db_table": "later_partition_lease",
            },
        ),
        migrations.CreateModel(
            name="PartitionSequence",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "topic",
                        "partition_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("topic", models.CharField(max_length=200)),
                ("partition_id", models.IntegerField()),
                ("next_sequence", models.BigIntegerField(default=0)),
            ],
            options={
                "db_table": "later_partition_sequence",
            },
        ),
        migrations.CreateModel(
            name="QueueDepth",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "queue_name",
                        "shard",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("queue_name", models.CharField(max_length=200)),
                ("shard", models.SmallIntegerField(db_default=0, default=0)),
                ("ready", models.BigIntegerField(default=0)),
            ],
            options={
                "db_table": "later_queue_depth",
            },
        ),
        migrations.CreateModel(
            name="QueueSample",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "minute_bucket",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("minute_bucket", models.BigIntegerField()),
                ("queued", models.BigIntegerField(default=0)),
                ("partitioned", models.BigIntegerField(default=0)),
            ],
            options={
                "db_table": "later_queue_samples",
            },
        ),
        migrations.CreateModel(
            name="StageCount",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "stage",
                        "shard",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("stage", models.CharField(max_length=20)),
                ("shard", models.SmallIntegerField(db_default=0, default=0)),
                ("count", models.BigIntegerField(default=0)),
            ],
            options={
                "db_table": "later_stage_counts",
            },
        ),
        migrations.CreateModel(
            name="StorageValue",
            fields=[
                ("key", models.CharField(max_length=500, primary_key=True, serialize=False)),
                ("value", models.BinaryField(null=True)),
                ("counter_value", models.BigIntegerField(null=True)),
                ("date_created", models.BigIntegerField()),
                ("date_updated", models.BigIntegerField(null=True)),
                ("date_expire", models.BigIntegerField(null=True)),
            ],
            options={
                "verbose_name": "storage value",
                "db_table": "later_storage",
            },
        ),
        migrations.CreateModel(
            name="Topic",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "topic",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("topic", models.CharField(max_length=200)),
                ("partitions", models.IntegerField()),
                ("created_at", models.BigIntegerField()),
            ],
            options={
                "db_table": "later_topic",
            },
        ),
        migrations.CreateModel(
            name="JobExecution",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "job_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("job_id", models.CharField(max_length=200)),
                ("owner", models.CharField(max_length=200)),
                ("lease_until", models.BigIntegerField()),
                ("attempt", models.IntegerField(default=1)),
                ("started_at", models.BigIntegerField()),
            ],
            options={
                "db_table": "later_job_execution",
                "indexes": [
                    models.Index(fields=["lease_until"], name="later_job_execution_lease_idx")
                ],
            },
        ),
        migrations.CreateModel(
            name="PartitionHead",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "topic",
                        "partition_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("topic", models.CharField(max_length=200)),
                ("partition_id", models.IntegerField()),
                ("sequence", models.BigIntegerField()),
                ("job_id", models.CharField(max_length=200)),
                ("earliest_run_at", models.BigIntegerField()),
                ("stage", models.CharField(max_length=20)),
            ],
            options={
                "db_table": "later_partition_head",
                "indexes": [
                    models.Index(
                        fields=["namespace", "earliest_run_at"], name="later_partition_head_due_idx"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="PartitionJob",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "topic",
                        "partition_id",
                        "sequence",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("topic", models.CharField(max_length=200)),
                ("partition_id", models.IntegerField()),
                ("sequence", models.BigIntegerField()),
                ("job_id", models.CharField(max_length=200)),
                ("earliest_run_at", models.BigIntegerField()),
            ],
            options={
                "db_table": "later_partition_job",
                "indexes": [
                    models.Index(
                        fields=[
                            "namespace",
                            "topic",
                            "partition_id",
                            "sequence",
                            "earliest_run_at",
                        ],
                        name="later_partition_job_head_idx",
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("namespace", "job_id"), name="later_partition_job_job_uniq"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="StorageRangeItem",
            fields=[
                ("sequence", models.BigAutoField(primary_key=True, serialize=False)),
                ("range_key", models.CharField(max_length=500)),
                ("value", models.BinaryField()),
                ("date_expire", models.BigIntegerField(null=True)),
            ],
            options={
                "db_table": "later_storage_range",
                "indexes": [
                    models.Index(
                        fields=["range_key", "sequence"], name="later_storage_range_key_idx"
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("range_key", "value"), name="later_storage_range_member_uniq"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="Worker",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "worker_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("worker_id", models.CharField(max_length=200)),
                ("host", models.CharField(max_length=200)),
                ("pid", models.IntegerField()),
                ("concurrency", models.IntegerField()),
                ("queues", models.TextField(default="[]")),
                ("busy", models.IntegerField(default=0)),
                ("started_at", models.BigIntegerField()),
                ("heartbeat_at", models.BigIntegerField()),
            ],
            options={
                "db_table": "later_worker",
                "indexes": [
                    models.Index(
                        fields=["namespace", "heartbeat_at"], name="later_worker_heartbeat_idx"
                    )
                ],
            },
        ),
    ]
