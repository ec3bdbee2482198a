# Users and groups use Django's own admin.
