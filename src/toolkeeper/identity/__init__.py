"""Who is calling, beyond ``tk_…`` tokens (issue 27): OAuth 2.1 access tokens from a
company's identity provider, the console's OpenID Connect sign-in, and OAuth to upstream
servers. Sits below the faces and providers, above the store and secrets."""
