# Roles are Django groups (apps.common.roles); users are Django's own.
