from django.db import migrations

ROLES = ("viewer", "operator", "admin")


def forwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    Group = apps.get_model("auth", "Group")
    for name in ROLES:
        Group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
