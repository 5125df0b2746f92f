"""What a run's record tells a person or an auditor (receipts, outcome, timeline), and what agents and test runners report (JUnit)."""
