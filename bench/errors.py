"""The errors a user's input meets: a UserError is one line naming the file, the field and the fix (exit
status 2, no traceback); a PlanError is a plan its hosts cannot run."""


class UserError(Exception):
    exit_status = 2


class PlanError(Exception):
    """A plan asks what its hosts cannot give, found while it is planned, before anything launches: a
    placement the hosts file rules out (a suite's check_placement); what one host cannot do (a suite's
    check_plan: its memory, GPUs, cores; the agent's planning of an entry's axes; a launch estimated
    past timeout_s); or params an entry lacks or contradicts. Not a UserError, since the catcher decides
    what it means: the controller refuses a placement in one line before touching any host (exit 2);
    on a host, the agent reports it as that host's failure and the other hosts go on (exit 1)."""
