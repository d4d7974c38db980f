"""Loaded by child Python processes started by tests: the same no-network guard as the test process."""
import no_network

no_network.install()
