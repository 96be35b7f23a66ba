"""The test site's one page type: an article that may link to another page (so the
reference index has something to record)."""
