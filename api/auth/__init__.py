"""Request authentication: AWS Signature Version 4 verified against keys stored in the database."""
