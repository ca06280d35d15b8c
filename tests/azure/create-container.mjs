// Creates a container in the Azurite emulator at the blob endpoint given (its well-known
// development account), for tests/all/object_storage/mod.rs: object stores cannot create
// containers.
import { BlobServiceClient, StorageSharedKeyCredential } from "@azure/storage-blob";

const [endpoint, container] = process.argv.slice(2);
if (!endpoint || !container) {
  console.error("usage: node create-container.mjs http://127.0.0.1:PORT/devstoreaccount1 CONTAINER");
  process.exit(2);
}
const account = "devstoreaccount1";
const key =
  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const client = new BlobServiceClient(endpoint, new StorageSharedKeyCredential(account, key));
await client.getContainerClient(container).createIfNotExists();
