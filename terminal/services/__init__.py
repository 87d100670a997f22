"""Business logic of the terminal app: log tailing with resume cursors, ANSI rendering,
file-transfer rules and terminal session bookkeeping. Consumers and views stay thin."""
