from apps.common.roles import ADMIN, OPERATOR, ROLES, VIEWER

__all__ = ["ADMIN", "OPERATOR", "ROLES", "VIEWER"]
