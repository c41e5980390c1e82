"""The pages the test site serves, one module a family."""
