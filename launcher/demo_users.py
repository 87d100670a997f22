"""The demo console's namespace and users' password (``launcher.terminal_demo``, and the tests' and bench's demo
console): no imports, so both can read them before Django is set up."""

NS = "rlark-jobs"
PASSWORD = "demo-pass-1"
