"""Names of the library's modules, by who may use them.

``APPS`` are the prompt-facing modules (``primsel.simulator.apps``), star-imported by programs,
setup programs (SIP) and evaluation programs (EP) alike; ``SETUP_TOOLS`` hold the tools only
SIPs may use (``primsel.simulator.setup_tools``) and ``CHECK_TOOLS`` the tools only EPs may use
(``primsel.simulator.check_tools``). The program process never imports the last two.
"""

APPS = ("exceptions", "time_utils", "room_booking", "company_directory", "work_calendar")
SETUP_TOOLS = ("company_directory", "room_booking", "work_calendar")
CHECK_TOOLS = ("exceptions", "time_utils", "work_calendar")
