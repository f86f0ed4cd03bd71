pub(crate) mod aws_credentials;
pub(crate) mod sigv4;
