"""Thin routes: validate (schemas), call a library function, shape the answer."""
