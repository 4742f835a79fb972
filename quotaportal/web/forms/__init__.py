"""The pages' forms, one module per page family beside its views (quotaportal.web.views):
field types, choices and the words on their labels; the rules are the services' (their
errors are mapped back onto the fields, common.show_service_errors)."""
