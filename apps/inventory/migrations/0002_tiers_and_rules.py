from django.db import migrations

TIERS = [
    ("access_logic", "Access & logic", 1, "Agent orchestration, sessions, tool-call protocol conversion"),
    ("hybrid_inference", "Hybrid inference", 2, "Small (1B) and medium (<=7B) INT8 models on CPU + modules"),
    ("external_large_model", "External large model", 3, "Requests that need >=70B models: GPU cluster or cloud API"),
]
RULES = [("pcie_lanes", None), ("power_budget", None), ("cpu_clock", "3.0"), ("module_tops", "30")]


def forwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    Tier = apps.get_model("inventory", "Tier")
    AdmissionRule = apps.get_model("inventory", "AdmissionRule")
    for kind, name, level, description in TIERS:
        Tier.objects.get_or_create(kind=kind, defaults={"name": name, "level": level, "description": description})
    for code, threshold in RULES:
        AdmissionRule.objects.get_or_create(code=code, defaults={"enforcement": "warn", "threshold": threshold})


class Migration(migrations.Migration):
    dependencies = [("inventory", "0001_initial")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
