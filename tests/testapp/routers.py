class OrdersOnOther:
    """ExternalOrder lives in the "other" database; everything else in "default"."""

    def _alias(self, model):
        return "other" if model._meta.model_name == "externalorder" else "default"

    def db_for_read(self, model, **hints):
        return self._alias(model)

    def db_for_write(self, model, **hints):
        return self._alias(model)

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        if model_name is None:
            return None
        return db == ("other" if model_name == "externalorder" else "default")
