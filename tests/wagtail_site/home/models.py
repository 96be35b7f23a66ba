"""An article page: a title and body that the search index holds, and a link to another
page that the reference index records."""

from __future__ import annotations

from django.db import models
from wagtail.models import Page
from wagtail.search import index


class ArticlePage(Page):
    body = models.TextField(blank=True)
    related = models.ForeignKey(
        "wagtailcore.Page", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    search_fields = [*Page.search_fields, index.SearchField("body")]
