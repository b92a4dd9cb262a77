"""The fault campaign (issue 19): real launcher and trainer processes through a scripted day of faults under
simulated controllers. Test tooling, not a product entry point: it runs the tests' plug-in model and the
test helpers' simulators, so it lives under tests/ and ships in no wheel. ``make campaign`` runs the day;
tests/integration/controllers/test_fault_campaign.py a scaled-down one."""
