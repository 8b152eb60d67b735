package storage

// The cloud drivers are linked here, in the package every URL goes through,
// so that s3://, gs:// and azblob:// open with no import on the user's side,
// as file:// and mem:// do. A program that wants its own clients passes
// Options.Open instead; the drivers then cost only binary size.
//
// What each scheme needs (the query reaches the driver's URL opener as it is;
// sluice shows URLs without it, so secrets in it stay out of errors):
//
// s3://BUCKET/PREFIX?region=R
//
//	Credentials and region come from the AWS SDK's usual chain
//	(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws, IMDS).
//	Query parameters: region, endpoint (a full URL, for S3-compatible
//	servers such as MinIO or versitygw), use_path_style=true (or
//	s3ForcePathStyle=true; most servers other than AWS need it),
//	disable_https=true, hostname_immutable, profile, anonymous=true, fips,
//	dualstack, accelerate, rate_limiter_capacity, role (an ARN to assume),
//	ssetype and kmskeyid (writes only), request_checksum_calculation and
//	response_checksum_validation ("when_required" for servers that reject
//	the SDK's default checksums). Any other parameter is an error.
//
// gs://BUCKET/PREFIX
//
//	Credentials are Application Default Credentials
//	(GOOGLE_APPLICATION_CREDENTIALS, gcloud's, or the metadata server).
//	STORAGE_EMULATOR_HOST=host:port (no scheme: the driver prepends
//	http://) sends every request to an emulator such as fake-gcs-server,
//	unauthenticated. Without credentials, opening fails with an error that
//	says so, unless anonymous=true (for public buckets). Query parameters:
//	anonymous=true, access_id,
//	private_key_path (both for signed URLs only), universe_domain, grpc=true.
//
// azblob://CONTAINER/PREFIX
//
//	The account comes from AZURE_STORAGE_ACCOUNT (or the storage_account
//	parameter) and the credential from AZURE_STORAGE_KEY, a connection
//	string (AZURE_STORAGE_CONNECTION_STRING), AZURE_STORAGE_SAS_TOKEN, or
//	else azidentity's default chain. The service URL is
//	https://ACCOUNT.blob.core.windows.net unless the parameters domain
//	(or AZURE_STORAGE_DOMAIN), protocol (or AZURE_STORAGE_PROTOCOL: http or
//	https), cdn or localemu (or AZURE_STORAGE_IS_LOCAL_EMULATOR) say
//	otherwise; a domain of 127.0.0.1:PORT or localhost:PORT, as Azurite
//	serves, puts the account in the path. The first azblob URL a process
//	opens fixes the credential read from the environment.
import (
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/s3blob"
)
