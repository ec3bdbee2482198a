"""Agent keys and node commands move from the telemetry app to this one, keeping their tables
(``telemetry_agenttoken``, ``telemetry_nodecommand``) and every row: the models are created in the
migration state only, nothing is written to the tables. Their content types are renamed, so the
permissions and admin history that point at them follow."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MODELS = ("agenttoken", "nodecommand")


def _rename(apps, schema_editor, old: str, new: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MODELS:
        if not content_type.objects.filter(app_label=new, model=model).exists():
            content_type.objects.filter(app_label=old, model=model).update(app_label=new)


def _content_types_to_agents(apps, schema_editor) -> None:
    _rename(apps, schema_editor, "telemetry", "agents")


def _content_types_to_telemetry(apps, schema_editor) -> None:
    _rename(apps, schema_editor, "agents", "telemetry")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        # The tables were made by telemetry's migrations; this claims them once they are complete.
        ('telemetry', '0008_stage_per_node_breakdown'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('audit', '0001_initial'),
        ('inventory', '0007_externalendpoint_latency_slo_ms'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='AgentToken',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('node', 'Node agent'), ('gateway', 'Gateway')], max_length=16)),
                        ('key_hash', models.CharField(editable=False, max_length=64, unique=True)),
                        ('key_prefix', models.CharField(editable=False, help_text='First characters of the key, to tell keys apart', max_length=8)),
                        ('note', models.CharField(blank=True, default='', max_length=200)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('created_by', models.CharField(blank=True, default='', max_length=150)),
                        ('last_used_at', models.DateTimeField(blank=True, null=True)),
                        ('revoked_at', models.DateTimeField(blank=True, null=True)),
                        ('expires_at', models.DateTimeField(blank=True, help_text='Refused from this time on (the old key of a rotation, after its overlap)', null=True)),
                        ('node', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='agent_tokens', to='inventory.node')),
                        ('rotated_to', models.OneToOneField(blank=True, help_text='The key that replaced this one', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='rotated_from', to='agents.agenttoken')),
                    ],
                    options={
                        'db_table': 'telemetry_agenttoken',
                        'ordering': ['kind', 'node__hostname', '-created_at'],
                        'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('kind', 'node'), ('node__isnull', False)), models.Q(('kind', 'gateway'), ('node__isnull', True)), _connector='OR'), name='agent_token_node_iff_node_kind')],
                    },
                ),
                migrations.CreateModel(
                    name='NodeCommand',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(max_length=64)),
                        ('args', models.JSONField(blank=True, default=dict)),
                        ('state', models.CharField(choices=[('pending', 'Pending'), ('delivered', 'Delivered'), ('in_progress', 'In progress on the agent'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('unknown', 'Unknown to the agent'), ('expired', 'Expired')], default='pending', max_length=16)),
                        ('reason', models.TextField(blank=True, default='')),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('created_by_name', models.CharField(blank=True, default='', max_length=150)),
                        ('expires_at', models.DateTimeField(blank=True, help_text='Not delivered after this time', null=True)),
                        ('delivered_at', models.DateTimeField(blank=True, null=True)),
                        ('progress_at', models.DateTimeField(blank=True, help_text="The agent's latest in_progress ack: it is still working on it", null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('result', models.JSONField(blank=True, default=dict)),
                        ('audit_event', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='audit.auditevent')),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('node', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='commands', to='inventory.node')),
                    ],
                    options={
                        'db_table': 'telemetry_nodecommand',
                        'ordering': ['-created_at', '-id'],
                        'indexes': [models.Index(fields=['node', 'state', 'created_at'], name='telemetry_n_node_id_6e582f_idx')],
                    },
                ),
            ],
            database_operations=[],
        ),
        # The content types follow the models (permissions, admin history). A top-level RunPython:
        # sqlmigrate (and the migration linter) shows it without running it.
        migrations.RunPython(_content_types_to_agents, _content_types_to_telemetry),
    ]
