"""Agent keys and node commands now belong to the agents app (``agents.0001_initial``): they leave
this app's migration state only; their tables stay as they are, with every row."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0001_initial'),
        ('telemetry', '0008_stage_per_node_breakdown'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='ingestbatch',
                    name='token',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='batches', to='agents.agenttoken'),
                ),
                migrations.RemoveField(
                    model_name='nodecommand',
                    name='audit_event',
                ),
                migrations.RemoveField(
                    model_name='nodecommand',
                    name='created_by',
                ),
                migrations.RemoveField(
                    model_name='nodecommand',
                    name='node',
                ),
                migrations.DeleteModel(
                    name='AgentToken',
                ),
                migrations.DeleteModel(
                    name='NodeCommand',
                ),
            ],
        ),
    ]
