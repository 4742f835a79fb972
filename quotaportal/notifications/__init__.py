"""Job events delivered outside the portal: signed webhooks (AWS's EventBridge envelope or a
Slack message) and e-mail to the submitter. The audit log is the outbox (quotas.Event.published);
`outbox.publish` turns committed events into deliveries, `sending` makes them, at least once
and in order per webhook."""
