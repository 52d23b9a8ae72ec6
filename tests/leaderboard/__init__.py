"""Tests of the site: API, website, dispatch, models, rankings, settings."""
