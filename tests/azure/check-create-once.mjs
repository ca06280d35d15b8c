// Checks what checkpoints on az:// rely on in the Azurite emulator at the blob endpoint given:
// a create-if-absent (If-None-Match: *) of a blob that exists is refused, so of two writers
// of one `_metadata` (or generation, or job id) only the first succeeds. Exits 0 if it is
// refused, 1 with the reason if not. For tests/all/object_storage/mod.rs.
import { BlobServiceClient, StorageSharedKeyCredential } from "@azure/storage-blob";

const [endpoint, container] = process.argv.slice(2);
const account = "devstoreaccount1";
const key =
  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const client = new BlobServiceClient(endpoint, new StorageSharedKeyCredential(account, key));
const blob = client.getContainerClient(container).getBlockBlobClient("create-once");
const create = (body) =>
  blob.upload(body, body.length, { conditions: { ifNoneMatch: "*" } });
await create("first");
try {
  await create("second");
} catch (e) {
  if (e.statusCode === 409 || e.statusCode === 412) {
    process.exit(0);
  }
  throw e;
}
console.error("a second create-if-absent of one blob succeeded");
process.exit(1);
