from django.contrib import admin

from .models import Order, Report


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ["id", "customer_email", "total", "created_at"]
    search_fields = ["customer_email"]


@admin.register(Report)
class ReportAdmin(admin.ModelAdmin):
    list_display = ["title", "created_at"]
