"""Node commands now belong to the agents app: the foreign keys to them follow in the migration
state only (the table, its rows and the constraints are unchanged)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0001_initial'),
        ('rollouts', '0003_cohort_gate_tolerance'),
    ]

    # Before telemetry lets go of its NodeCommand, so no state points at a model that is gone.
    run_before = [('telemetry', '0009_agent_tokens_and_commands_to_agents')]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='rolloutnode',
                    name='install_command',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='agents.nodecommand'),
                ),
                migrations.AlterField(
                    model_name='rolloutnode',
                    name='restore_command',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='agents.nodecommand'),
                ),
            ],
        ),
    ]
