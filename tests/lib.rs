//! Shared fixtures for the cross-component tests.
