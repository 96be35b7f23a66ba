"""What the demo page remembers: the jobs its buttons enqueued."""

from django.db import models


class DemoJob(models.Model):
    """One job enqueued from the demo page, written in the same transaction as the job."""

    job_id = models.CharField(max_length=26, unique=True)
    label = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["label", "-created_at"], name="demo_job_label_newest")]

    def __str__(self) -> str:
        return f"{self.label} ({self.job_id})"
