"""The audit controller: PolicyReports of what the admission policies in force now deny."""
