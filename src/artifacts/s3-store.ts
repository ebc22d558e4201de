import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import {
  ArtifactNameError,
  ArtifactNotFoundError,
  checkedName,
  type ArtifactEntry,
  type ArtifactStore,
  type StoredArtifact,
} from './artifact-store.js';
import { sha256Of, verified } from './checksum.js';

export interface S3Location {
  bucket: string;
  /** Key prefix every artifact lives under, without leading or trailing slash ('' for the bucket's root). */
  prefix: string;
}

export interface S3Settings {
  /** An S3-compatible server's URL (MinIO, Ceph, moto); unset: AWS itself. */
  endpoint?: string | undefined;
  region?: string | undefined;
  /** bucket in the path (http://host/bucket/key), as most S3-compatible servers want; AWS takes virtual hosts. */
  forcePathStyle?: boolean | undefined;
}

/** s3://bucket/some/prefix → its bucket and prefix; anything else is refused with the form it needs. */
export function parseS3Url(url: string): S3Location {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(url);
  if (!m)
    throw new ArtifactNameError(
      `${url} is not an S3 URI: write s3://bucket/optional/prefix (a bucket name is 3-63 lowercase letters, digits, dots, hyphens)`,
    );
  return { bucket: m[1] as string, prefix: (m[2] ?? '').replace(/^\/+|\/+$/g, '') };
}

/** The object metadata key that carries the writer's sha256, checked again on every read. */
const SHA256_META = 'sha256';

const notFound = (err: unknown) =>
  err instanceof S3ServiceException &&
  (err.name === 'NoSuchKey' || err.name === 'NotFound' || err.$metadata.httpStatusCode === 404);

/**
 * Artifacts in a bucket of S3-compatible object storage, so workers, trainers and policy servers
 * on different hosts share them without a shared disk. A PUT is atomic in S3 (an object appears
 * whole or not at all). Credentials come from the AWS SDK's standard chain (AWS_ACCESS_KEY_ID /
 * AWS_SECRET_ACCESS_KEY, AWS_PROFILE, an instance or pod role); Rein never logs them.
 */
export class S3ArtifactStore implements ArtifactStore {
  readonly url: string;
  private readonly location: S3Location;
  private readonly client: S3Client;

  constructor(url: string, settings: S3Settings = {}) {
    // The SDK warns on Node 20 about its releases after January 2027; Rein pins its version, so the warning is noise on
    // every command.
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    this.location = parseS3Url(url);
    this.url = `s3://${this.location.bucket}${this.location.prefix ? `/${this.location.prefix}` : ''}`;
    this.client = new S3Client({
      ...(settings.endpoint && { endpoint: settings.endpoint }),
      region: settings.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1',
      forcePathStyle: settings.forcePathStyle ?? settings.endpoint !== undefined,
    });
  }

  uriOf(name: string): string {
    return `s3://${this.location.bucket}/${this.keyOfName(name)}`;
  }

  async put(name: string, bytes: Buffer | string): Promise<StoredArtifact> {
    const data = typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
    const sha256 = sha256Of(data);
    const key = this.keyOfName(name);
    // The SHA-256 checksum header makes the server refuse bytes that changed on the way.
    await this.client.send(
      new PutObjectCommand({
        Bucket: this.location.bucket,
        Key: key,
        Body: data,
        ChecksumSHA256: Buffer.from(sha256, 'hex').toString('base64'),
        Metadata: { [SHA256_META]: sha256 },
      }),
    );
    return { uri: `s3://${this.location.bucket}/${key}`, sha256, bytes: data.length };
  }

  async get(uri: string, expected?: { sha256: string }): Promise<Buffer> {
    const key = this.keyOf(uri);
    try {
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.location.bucket, Key: key }));
      const data = Buffer.from((await res.Body?.transformToByteArray()) ?? []);
      verified(uri, data, res.Metadata?.[SHA256_META]);
      return verified(uri, data, expected?.sha256);
    } catch (err) {
      if (notFound(err)) throw new ArtifactNotFoundError(uri);
      throw err;
    }
  }

  async exists(uri: string): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.location.bucket, Key: this.keyOf(uri) }));
      return true;
    } catch (err) {
      if (notFound(err)) return false;
      throw err;
    }
  }

  async delete(uri: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.location.bucket, Key: this.keyOf(uri) }));
  }

  async list(prefix: string): Promise<string[]> {
    return (await this.listEntries(prefix)).map((entry) => entry.uri);
  }

  async listEntries(prefix: string): Promise<ArtifactEntry[]> {
    const start =
      prefix === '' ? this.keyPrefix() : `${this.keyPrefix()}${checkedName(prefix)}${prefix.endsWith('/') ? '/' : ''}`;
    const entries: ArtifactEntry[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.location.bucket, Prefix: start, ContinuationToken: token }),
      );
      for (const object of page.Contents ?? []) {
        if (object.Key)
          entries.push({
            uri: `s3://${this.location.bucket}/${object.Key}`,
            bytes: object.Size ?? 0,
            modifiedAt: object.LastModified?.getTime() ?? 0,
          });
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return entries.sort((a, b) => (a.uri < b.uri ? -1 : a.uri > b.uri ? 1 : 0));
  }

  close(): void {
    this.client.destroy();
  }

  private keyPrefix(): string {
    return this.location.prefix ? `${this.location.prefix}/` : '';
  }

  private keyOfName(name: string): string {
    return `${this.keyPrefix()}${checkedName(name)}`;
  }

  /** The key of a URI of this store; a URI of another bucket or outside the prefix is refused. */
  private keyOf(uri: string): string {
    const { bucket, prefix: key } = parseS3Url(uri);
    const inside =
      bucket === this.location.bucket && key.startsWith(this.keyPrefix()) && key.length > this.keyPrefix().length;
    if (!inside) throw new ArtifactNameError(`artifact ${uri} is outside the artifact store ${this.url}`);
    checkedName(key.slice(this.keyPrefix().length));
    return key;
  }
}
