"""Latency histograms (contract 3): the raw per-node histograms, partitioned by time, and
their per-minute merges per node and per tier."""

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.db.models.deletion
from django.db import migrations, models

CREATE_RAW = """
CREATE SEQUENCE telemetry_latencysample_seq;
CREATE TABLE telemetry_latencysample (
    id bigint NOT NULL DEFAULT nextval('telemetry_latencysample_seq'),
    time timestamptz NOT NULL,
    node_id bigint NOT NULL,
    stage varchar(16) NOT NULL,
    hist_offset integer NOT NULL,
    counts integer[] NOT NULL,
    count integer NOT NULL,
    PRIMARY KEY (id, time)
) PARTITION BY RANGE (time);
ALTER SEQUENCE telemetry_latencysample_seq OWNED BY telemetry_latencysample.id;
CREATE INDEX telemetry_l_node_id_54ede4_idx ON telemetry_latencysample (node_id, time);
CREATE INDEX latencysample_time_brin ON telemetry_latencysample USING brin (time);
"""
DROP_RAW = "DROP TABLE telemetry_latencysample"


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0006_module_type_capabilities'),
        ('telemetry', '0006_endpointrollup'),
    ]

    operations = [
        # The raw table is range-partitioned by time like the other raw sample tables
        # (apps/telemetry/partitions.py); the writer and the partitions task make its partitions.
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(CREATE_RAW, DROP_RAW)],
            state_operations=[
                migrations.CreateModel(
                    name='LatencySample',
                    fields=[
                        ('pk', models.CompositePrimaryKey('id', 'time', blank=True, editable=False, primary_key=True, serialize=False)),
                        ('id', models.BigIntegerField(db_default=models.Func(models.Value('telemetry_latencysample_seq'), function='nextval', output_field=models.BigIntegerField()), editable=False)),
                        ('time', models.DateTimeField()),
                        ('stage', models.CharField(choices=[('perception', 'Perception'), ('intent', 'Intent'), ('planning', 'Planning'), ('tool_call', 'Tool call'), ('generation', 'Generation'), ('memory_update', 'Memory update')], max_length=16)),
                        ('hist_offset', models.IntegerField(help_text='Bucket index of counts[0]')),
                        ('counts', django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None)),
                        ('count', models.IntegerField(help_text='Latencies in the histogram (the sum of counts)')),
                        ('node', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.node')),
                    ],
                    options={
                        'ordering': ['-time'],
                        'indexes': [models.Index(fields=['node', 'time'], name='telemetry_l_node_id_54ede4_idx'), django.contrib.postgres.indexes.BrinIndex(fields=['time'], name='latencysample_time_brin')],
                    },
                ),
            ],
        ),
        migrations.CreateModel(
            name='NodeLatencyRollup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('stage', models.CharField(choices=[('perception', 'Perception'), ('intent', 'Intent'), ('planning', 'Planning'), ('tool_call', 'Tool call'), ('generation', 'Generation'), ('memory_update', 'Memory update')], max_length=16)),
                ('minute', models.DateTimeField()),
                ('count', models.BigIntegerField()),
                ('buckets', django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None)),
                ('counts', django.contrib.postgres.fields.ArrayField(base_field=models.BigIntegerField(), size=None)),
                ('node', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.node')),
                ('tier', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.tier')),
            ],
            options={
                'ordering': ['-minute'],
                'indexes': [django.contrib.postgres.indexes.BrinIndex(fields=['minute'], name='nodelatencyrollup_minute_brin')],
                'constraints': [models.UniqueConstraint(fields=('node', 'stage', 'minute'), name='nodelatencyrollup_unique')],
            },
        ),
        migrations.CreateModel(
            name='TierLatencyRollup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('stage', models.CharField(choices=[('perception', 'Perception'), ('intent', 'Intent'), ('planning', 'Planning'), ('tool_call', 'Tool call'), ('generation', 'Generation'), ('memory_update', 'Memory update')], max_length=16)),
                ('minute', models.DateTimeField()),
                ('count', models.BigIntegerField()),
                ('buckets', django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=None)),
                ('counts', django.contrib.postgres.fields.ArrayField(base_field=models.BigIntegerField(), size=None)),
                ('tier', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.tier')),
            ],
            options={
                'ordering': ['-minute'],
                'indexes': [models.Index(fields=['minute'], name='tierlatencyrollup_minute')],
                'constraints': [models.UniqueConstraint(fields=('tier', 'stage', 'minute'), name='tierlatencyrollup_unique')],
            },
        ),
    ]
