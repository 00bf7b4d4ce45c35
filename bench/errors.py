"""User errors: one line naming the file, the field and the fix; exit status 2, no traceback."""


class UserError(Exception):
    exit_status = 2
