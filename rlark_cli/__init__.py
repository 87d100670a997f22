"""``rlark``, the command-line client of the console's REST API: no Django, only the standard library and PyYAML.

``main`` builds the parser and runs a command; ``client`` holds the connection and the shared output; ``jobs`` and
``ssh`` hold the commands."""
