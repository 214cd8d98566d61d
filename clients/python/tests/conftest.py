# The client's own tests use the fixtures an integrator's suite uses: the emulator of the run,
# reset before each test (audience_client.pytest_plugin).
pytest_plugins = ["audience_client.pytest_plugin"]
