"""In-memory fakes of docket's ports, one module per port, keeping the real adapters' promises: the contract tests
(tests/integration) hold each fake and its real adapter to the same cases. Test code: never installed with docket."""
