"""The ops dashboard at /dashboard: static pages plus the few signed JSON routes they need.

The pages are plain HTML, ES modules and CSS (api/dashboard/static), served as files:
no build step and nothing fetched from the internet. The browser signs every data request
with SigV4 itself, so the JSON routes here and the /v1 routes authenticate exactly as the
AWS CLI does and see only the signing account's resources.
"""
