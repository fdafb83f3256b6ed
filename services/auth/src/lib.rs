//! JWT/JWKS authentication, scopes and tenants for the cluster profile (to be written).
