"""The Job document: naming, selectors, rank layout, validation, rendering and the RLinf importer.

Plain-data modules (no ORM access except ``inventory.Inventory.from_db``): the single source of truth
used by the wizard, the REST API, YAML import and the ``rlark`` CLI.
"""
