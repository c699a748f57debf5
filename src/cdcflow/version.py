"""The package's version, in a module of its own: modules at the bottom of the layout (the event contract) read
it without importing the package root, which re-exports the library API above them."""

__version__ = "0.1.0"
