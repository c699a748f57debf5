"""The development side: what development, the tests and the demo need, apart from what a production install
runs. stack/ installs and runs real local services (`cdcflow stack`, `make run`), testing/ is the test harness,
demo/ the demo workloads and `cdcflow run`'s chain, registry/ a local schema registry with the Confluent API.

Runtime code never imports this package (an import contract in pyproject.toml): the CLI loads the development
commands by name when they are there, and reads the local stack's endpoints from the file the stack writes
(`cdcflow.config.local_stack`). The wheel leaves it out; a checkout has it (`make install`)."""
